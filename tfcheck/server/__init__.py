"""`tfcheck server`: the linter as a Language Server Protocol server, so pitfalls show while code is written.

The modules, from the protocol inwards:

- `server.py`: the pygls server: document and notebook sync, when to lint (debounced), what to publish;
- `actions.py`: code actions (a rule's fix, `# noqa`, fix all) and hover, built on tfcheck/fixes.py;
- `diagnostics.py`: findings as LSP diagnostics (positions in the client's units, related information);
- `state.py`: one project's lint state, kept warm between edits, through the CLI's own project pass;
- `documents.py`: the documents an editor has open, as the linter reads them (a notebook as nbformat JSON).

Only `server.py` and `actions.py`/`diagnostics.py` import pygls/lsprotocol; `state.py` and `documents.py`
are the linter's side and know nothing of the protocol.
"""
