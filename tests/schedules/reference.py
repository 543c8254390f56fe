"""NumPy references for the operators the default schedules cover, written for clarity, not speed."""

from __future__ import annotations

import numpy as np


def pad_nhwc(x: np.ndarray, pads: tuple[int, int, int, int], value: float = 0.0) -> np.ndarray:
    """Pad the H and W axes of an NHWC array by (top, left, bottom, right)."""
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=value)


def windows(x: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int], dilation: tuple[int, int]) -> np.ndarray:
    """All (kh, kw) windows of an already padded NHWC array: shape (N, OH, OW, KH, KW, C)."""
    n, h, w, c = x.shape
    kh, kw = kernel
    oh = (h - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.empty((n, oh, ow, kh, kw, c), x.dtype)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dilation[0], i * dilation[0] + strides[0] * (oh - 1) + 1, strides[0])
            cols = slice(j * dilation[1], j * dilation[1] + strides[1] * (ow - 1) + 1, strides[1])
            out[:, :, :, i, j, :] = x[:, rows, cols, :]
    return out


def conv2d_nhwc(x, w, strides, pads, dilation) -> np.ndarray:
    """Convolution with an HWIO kernel."""
    win = windows(pad_nhwc(x, pads), w.shape[:2], strides, dilation)
    return np.einsum("nhwijc,ijco->nhwo", win, w, optimize=True)


def depthwise_nhwc(x, w, strides, pads, dilation) -> np.ndarray:
    """Depthwise convolution with a (KH, KW, C, M) kernel: output channel c * M + m."""
    win = windows(pad_nhwc(x, pads), w.shape[:2], strides, dilation)
    out = np.einsum("nhwijc,ijcm->nhwcm", win, w, optimize=True)
    return out.reshape(*out.shape[:3], -1)


def pool_nhwc(x, kernel, strides, pads, kind: str) -> np.ndarray:
    """Max or average pooling (average over the window without the padding, as TFLite does)."""
    if kind == "max":
        return windows(pad_nhwc(x, pads, -np.inf), kernel, strides, (1, 1)).max(axis=(3, 4))
    sums = windows(pad_nhwc(x, pads), kernel, strides, (1, 1)).sum(axis=(3, 4))
    counts = windows(pad_nhwc(np.ones_like(x), pads), kernel, strides, (1, 1)).sum(axis=(3, 4))
    return sums / counts


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation over the last axis."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta
