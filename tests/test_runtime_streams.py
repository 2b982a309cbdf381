"""stream= accepts every stream object a kernel author has at hand and yields its raw handle."""

import pytest

from runtime_fakes import CupyStream, HandleStream, ProtocolStream, TorchStream
from tlx.runtime.errors import TLXRuntimeError
from tlx.runtime.streams import stream_handle


def test_none_is_the_legacy_default_stream():
    assert stream_handle(None) == 0


def test_raw_handles():
    assert stream_handle(0) == 0
    assert stream_handle(2) == 2
    assert stream_handle(0x7F12_3456_7890) == 0x7F12_3456_7890


def test_stream_objects():
    assert stream_handle(TorchStream(0x1111)) == 0x1111
    assert stream_handle(CupyStream(0x2222)) == 0x2222
    assert stream_handle(ProtocolStream(0x3333)) == 0x3333
    assert stream_handle(HandleStream(0x4444)) == 0x4444


def test_cuda_bindings_stream_handle():
    from cuda.bindings import driver as drv

    assert stream_handle(drv.CUstream(0x5555)) == 0x5555


def test_bad_streams_are_refused():
    with pytest.raises(TLXRuntimeError, match="bool"):
        stream_handle(True)
    with pytest.raises(TLXRuntimeError, match="not a CUDA stream"):
        stream_handle("stream")
    with pytest.raises(TLXRuntimeError, match="negative"):
        stream_handle(-3)
    with pytest.raises(TLXRuntimeError, match="64 bits"):
        stream_handle(2 ** 64)

    class Broken:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(TLXRuntimeError, match="version, handle"):
        stream_handle(Broken())


def test_default_stream_follows_torch_current_stream(monkeypatch):
    import sys
    import types

    from tlx.runtime import streams

    monkeypatch.setattr(streams, "_TORCH_STREAM", None)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert stream_handle(None) == 0                     # torch not imported: legacy default
    fake = types.ModuleType("torch")
    current = {0: 0xAAA0, 1: 0xBBB0}
    device = [1]
    fake._C = types.SimpleNamespace(_cuda_getDevice=lambda: device[0],
                                    _cuda_getCurrentRawStream=lambda d: current[d])
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert stream_handle(None) == 0xBBB0                # `with torch.cuda.stream(s)` is honoured
    device[0] = 0
    assert streams.default_stream() == 0xAAA0
    assert stream_handle(7) == 7                        # an explicit stream wins


def test_default_stream_with_cpu_only_torch(monkeypatch):
    import sys
    import types

    from tlx.runtime import streams

    monkeypatch.setattr(streams, "_TORCH_STREAM", None)
    fake = types.ModuleType("torch")
    fake._C = types.SimpleNamespace()
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert stream_handle(None) == 0
