"""From the user's source to a frozen, converted model: discovery, SavedModel signatures, tracing
in a child process, and the one module that imports TensorFlow (`bridge.py`)."""
