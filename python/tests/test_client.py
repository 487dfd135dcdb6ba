"""The client API without a manager: everything works, says so once, keeps the program's own
thread count; threads() sizes the BLAS pool to it."""

import numpy  # noqa: F401  (loads OpenBLAS, so threadpoolctl has a BLAS pool to size)
from threadpoolctl import threadpool_info

import cpumgr


def blas_threads():
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_without_a_manager_the_client_keeps_its_own_thread_count_and_says_so_once(tmp_path, capfd):
    c = cpumgr.Client(name="solo", max=3, socket=str(tmp_path / "nobody.sock"))
    assert c.mode == "unmanaged"
    assert c.id is None
    assert c.team() == 3
    assert c.team(2) == 2
    assert c.allocation() is None
    assert c.should_yield(3) is None
    c.request(1, 1, 3)
    c.idle()
    c.report_speedup(2, 1.8)
    assert c.team() == 3, "requests mean nothing without a manager"
    err = capfd.readouterr().err
    assert err.count("cpumgr: no manager") == 1, err


def test_mode_off_is_silent(capfd):
    c = cpumgr.Client(max=2, mode="off")
    assert c.mode == "unmanaged" and c.team() == 2
    assert "cpumgr:" not in capfd.readouterr().err


def test_threads_sizes_the_blas_pool_for_the_section_and_restores_it(tmp_path):
    cpumgr.finalize()
    cpumgr.init(max=3, socket=str(tmp_path / "nobody.sock"))
    try:
        before = blas_threads()
        assert before, "numpy's BLAS is visible to threadpoolctl"
        with cpumgr.threads() as t:
            assert t.count == 3
            assert blas_threads() == [3] * len(before)
        assert blas_threads() == before

        @cpumgr.threads(cap=1)
        def section():
            return blas_threads()

        assert section() == [1] * len(before)
        assert blas_threads() == before
    finally:
        cpumgr.finalize()


def test_sections_that_overlap_share_the_pools_and_the_last_one_restores_them(tmp_path):
    """Sections in two threads that overlap (A opens, B opens, A closes, B closes), and nested
    ones: while any is open the pools have the largest open size; the last one to close gives
    every pool back its size from before the first."""
    import threading

    cpumgr.finalize()
    cpumgr.init(max=3, socket=str(tmp_path / "nobody.sock"))
    try:
        before = blas_threads()
        a_open, b_open, a_closed = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def a():
            with cpumgr.threads(cap=1):
                a_open.set()
                b_open.wait(10)
            a_closed.set()

        def b():
            a_open.wait(10)
            with cpumgr.threads(cap=2):
                seen["both"] = blas_threads()
                b_open.set()
                a_closed.wait(10)
                seen["b alone"] = blas_threads()

        ta, tb = threading.Thread(target=a), threading.Thread(target=b)
        ta.start(), tb.start()
        ta.join(20), tb.join(20)
        assert seen == {"both": [2] * len(before), "b alone": [2] * len(before)}, seen
        assert blas_threads() == before
        with cpumgr.threads(cap=3):
            with cpumgr.threads(cap=1):
                assert blas_threads() == [3] * len(before), "the larger open section's size"
            assert blas_threads() == [3] * len(before)
        assert blas_threads() == before
    finally:
        cpumgr.finalize()
