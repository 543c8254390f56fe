"""The build's conductors: the driver in the main process and the compile child.

They run the stages in order (`trace/`, `frontend/`, `schedules/` or `tuning/`, `cache/`);
no stage imports them.
"""
