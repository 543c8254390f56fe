"""Errors raised by the runtime; each message says what to do about it."""

from __future__ import annotations


class ArtifactError(RuntimeError):
    """An artifact cannot be used: unreadable manifest, SHA-256 mismatch, wrong machine or versions."""


class InputError(TypeError, ValueError):
    """Arguments do not match the artifact's input specs (count, shape or dtype).

    It is both a TypeError and a ValueError so that callers catching either, as they would for
    TensorFlow's own argument errors, also catch this one.
    """


class NotCompiledError(RuntimeError):
    """`TFCHECK_AOT=strict` and no fresh artifact can run this call."""
