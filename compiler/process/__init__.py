"""What every step of the build runs on: child processes and the typed messages between them.

The driver (`compiler/build/`) and each stage's child (tracing, compiling, benchmarking) speak
through these, so this folder imports no other stage of the compiler.
"""
