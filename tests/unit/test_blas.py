"""kbgate's processes ask OpenBLAS for one thread per call."""

from __future__ import annotations

from gateway.blas import OPENBLAS_THREADS, single_threaded_blas


def test_blas_gets_one_thread_unless_the_environment_chose() -> None:
    """Without a setting OpenBLAS is asked for one thread; an operator's value is kept."""
    empty: dict[str, str] = {}
    assert single_threaded_blas(empty) is True
    assert empty == {OPENBLAS_THREADS: "1"}
    chosen = {OPENBLAS_THREADS: "4"}
    assert single_threaded_blas(chosen) is False
    assert chosen == {OPENBLAS_THREADS: "4"}
