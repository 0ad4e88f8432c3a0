"""The network model on hand-computed cases, its byte count against real Arrow IPC blocks, its
latency against a plain simulation of the hops and links, and the repetition interval."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engine.blocks import to_ipc
from harness.core.events import row_bytes
from harness.engine.calibrate import fit, synthetic_events
from harness.measure.latency import event_latencies
from harness.measure.network import Copies, NetworkProfile, resources
from harness.core.repetitions import kept, median_interval

PROFILE = NetworkProfile(name="test", send_s_per_message=1e-6, send_s_per_byte=1e-9, send_s_per_block=1e-4,
                         recv_s_per_message=2e-6, recv_s_per_byte=2e-9, recv_s_per_block=3e-4, block_bytes=100,
                         block_events=10, bandwidth_bps=8e6, hop_latency_s=1e-3, result_bytes=16, merge_tasks=1)


def one_worker(sizes, n_dispatchers=1):
    seqs = np.arange(len(sizes))
    return Copies.of(seqs, np.array(sizes), {0: (seqs, np.zeros(len(sizes)))}, n_dispatchers)


def test_one_dispatcher_one_worker_one_link_by_hand():
    res = resources(PROFILE, one_worker([200, 300]), 1, 1, dispatch_s=0.01, worker_s=np.array([0.02]),
                    results=np.array([5]), merge_max_s=0.001)
    # two copies in one block: 500 bytes + 100 of framing over 1 MB/s
    assert res.times["dispatcher_cpu"] == pytest.approx(0.01 + 2e-6 + 500e-9 + 1e-4)
    assert res.times["dispatcher_link"] == pytest.approx(600 * 8 / 8e6)
    assert res.times["worker_link"] == pytest.approx(600 * 8 / 8e6)  # more than its 5 x 16 result bytes
    assert res.times["worker_cpu"] == pytest.approx(0.02 + 4e-6 + 1000e-9 + 3e-4)
    assert res.times["merge"] == pytest.approx(0.001)  # its CPU, more than 80 bytes over the link
    assert res.bottleneck == ("worker_cpu", pytest.approx(0.020305))
    assert res.bytes_sent == 600 and res.copies == 2


def test_results_can_make_the_worker_link_the_bottleneck():
    res = resources(PROFILE, one_worker([200]), 1, 1, 0.0, np.array([0.0]), np.array([10_000]), 0.0)
    assert res.times["worker_link"] == pytest.approx(10_000 * 16 * 8 / 8e6)
    assert res.times["merge"] == pytest.approx(10_000 * 16 * 8 / 8e6)  # one merge task receives them all


def test_blocks_are_a_dispatchers_batches_per_worker():
    # 8 events over 2 dispatchers, batches of 2 of a dispatcher's events: dispatcher 0 sends events
    # 0, 2 | 4, 6 and dispatcher 1 events 1, 3 | 5, 7, each batch one block to worker 0, and only
    # events 0 and 7 to worker 1
    seqs = np.arange(8)
    copies = Copies.of(seqs, np.full(8, 10), {0: (seqs, np.zeros(8)), 1: (np.array([0, 7]), np.zeros(2))}, 2)
    d, w = copies.blocks(2, 2)
    assert sorted(zip(d.tolist(), w.tolist())) == [(0, 0), (0, 0), (0, 1), (1, 0), (1, 0), (1, 1)]


def test_without_a_network_only_the_compute_resources_count():
    res = resources(NetworkProfile(), one_worker([200, 300]), 1, 1, 0.01, np.array([0.02]), np.array([5]), 0.5)
    assert res.times == {"dispatcher_cpu": 0.01, "worker_cpu": 0.02}


def test_row_bytes_are_the_arrow_blocks_bytes_within_buffer_padding():
    ev = synthetic_events(500, 7)
    batch = ev.to_arrow()
    small = len(to_ipc(batch.take(np.arange(100))))
    full = len(to_ipc(batch))
    buffers = sum(len(c.buffers()) for c in batch.columns)
    # a block's bytes grow by its events' bytes; the rest (framing) does not depend on its size
    assert abs(full - small - int(row_bytes(ev.take(np.arange(100, 500))).sum())) <= 8 * buffers


def test_calibration_fit_recovers_known_costs():
    rows = [{"events": n, "terms": t, "bytes": n * b, "ipc_bytes": n * b + 2000,
             "send_s": 1e-4 + 2e-7 * n + 3e-10 * n * b, "recv_s": 5e-5 + 1e-7 * n + 1e-10 * n * b}
            for n in (10, 100, 1000) for t, b in ((1, 115), (8, 143), (32, 239))]
    got = fit(rows)
    assert got["send_s_per_block"] == pytest.approx(1e-4) and got["send_s_per_message"] == pytest.approx(2e-7)
    assert got["send_s_per_byte"] == pytest.approx(3e-10) and got["recv_s_per_byte"] == pytest.approx(1e-10)
    assert got["block_bytes"] == 2000


def plain(n, dispatch_s, n_disp, rate, workers, sizes, p: NetworkProfile):
    """Copies leave a dispatcher in (event, worker) order, queue on its link, hop, queue on the
    worker's link in arrival order, then wait for the worker in seq order; a result hops to the merge."""
    bw = p.bandwidth_bps
    tx = (lambda b: b * 8.0 / bw if bw > 0 else 0.0)
    copies = sorted((s, w, x) for w, (seqs, svc) in workers.items() for s, x in zip(seqs.tolist(), svc.tolist()))
    send = [0.0] * n
    for s, _, _ in copies:
        send[s] += p.send_s_per_message + sizes[s] * p.send_s_per_byte
    arrival = [i / rate for i in range(n)]
    leave, free = [0.0] * n, [float("-inf")] * n_disp
    for i in range(n):
        free[i % n_disp] = max(arrival[i], free[i % n_disp]) + dispatch_s + send[i]
        leave[i] = free[i % n_disp]
    link, ready = [float("-inf")] * n_disp, {}
    for s, w, x in copies:  # dispatcher links
        link[s % n_disp] = max(leave[s], link[s % n_disp]) + tx(sizes[s])
        ready[(s, w)] = link[s % n_disp] + p.hop_latency_s
    wlink = {}
    # worker links, in arrival order; arrivals equal but for rounding (two sums of the same times)
    # are taken in seq order, as the model's stable order takes them
    for s, w, x in sorted(copies, key=lambda c: (c[1], round(ready[(c[0], c[1])], 12), c[0])):
        wlink[w] = max(ready[(s, w)], wlink.get(w, float("-inf"))) + tx(sizes[s])
        ready[(s, w)] = wlink[w]
    done, cpu = list(leave), {}
    for s, w, x in sorted(copies, key=lambda c: (c[1], c[0])):  # workers, in seq order
        cpu[w] = max(ready[(s, w)], cpu.get(w, float("-inf"))) + x + p.recv_s_per_message + sizes[s] * p.recv_s_per_byte
        done[s] = max(done[s], cpu[w] + p.hop_latency_s)
    return [d - a for d, a in zip(done, arrival)]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(1, 3), st.integers(1, 3), st.sampled_from([0.0, 4e5, 8e6]), st.data())
def test_latencies_with_links_and_hops_equal_a_plain_simulation(n, n_disp, n_workers, bw, data):
    workers = {}
    for w in range(n_workers):
        seqs = sorted(set(data.draw(st.lists(st.integers(0, n - 1), max_size=n))))
        service = data.draw(st.lists(st.floats(0.0, 0.01), min_size=len(seqs), max_size=len(seqs)))
        workers[w] = (np.array(seqs, np.int64), np.array(service))
    sizes = np.array(data.draw(st.lists(st.integers(100, 2000), min_size=n, max_size=n)), np.int64)
    p = NetworkProfile(name="t", send_s_per_message=1e-5, send_s_per_byte=1e-8, recv_s_per_message=2e-5,
                       recv_s_per_byte=2e-8, bandwidth_bps=bw, hop_latency_s=1e-4)
    got = event_latencies(Copies.of(np.arange(n), sizes, workers, n_disp), n, 0.001, n_disp, 500.0, p)
    assert np.allclose(got, plain(n, 0.001, n_disp, 500.0, workers, sizes.tolist(), p), rtol=0, atol=1e-12)


def test_copies_reaching_a_workers_link_together_go_in_seq_order():
    """Found by the property above: copies of events 8 and 9 reach worker 1's link at the same time
    (sums of the same times in another order); the earlier event goes first."""
    workers = {0: (np.array([0, 8]), np.zeros(2)), 1: (np.array([8, 9]), np.zeros(2)), 2: (np.array([9]), np.zeros(1))}
    sizes = np.full(10, 100, np.int64)
    p = NetworkProfile(name="t", send_s_per_message=1e-5, send_s_per_byte=1e-8, recv_s_per_message=2e-5,
                       recv_s_per_byte=2e-8, bandwidth_bps=4e5, hop_latency_s=1e-4)
    got = event_latencies(Copies.of(np.arange(10), sizes, workers, 2), 10, 0.001, 2, 500.0, p)
    assert np.allclose(got, plain(10, 0.001, 2, 500.0, workers, sizes.tolist(), p), rtol=0, atol=1e-12)
    # event 8 (arrives at 16 ms): dispatched at 17.022 ms, its second copy off the dispatcher's link at
    # 21.022, a hop, worker 1's link first (2 ms), received (22 us), a hop: 23.244 ms
    assert got[8] == pytest.approx(0.007244, abs=1e-9)


def test_a_hop_and_a_slow_link_add_their_time():
    copies = one_worker([100, 100, 100])
    none = event_latencies(copies, 3, 0.0, 1, 1.0)
    slow = event_latencies(copies, 3, 0.0, 1, 1.0, NetworkProfile(name="t", bandwidth_bps=8e3, hop_latency_s=0.01))
    # 100 bytes at 1 kB/s twice (dispatcher link, worker link) and two hops; events 1 s apart never queue
    assert np.allclose(none, 0.0) and np.allclose(slow, 2 * 0.1 + 2 * 0.01)


def test_median_interval_by_order_statistics():
    med, lo, hi, cov = median_interval([5, 1, 4, 2, 6, 3])
    assert (med, lo, hi) == (3.5, 1, 6) and cov == pytest.approx(1 - 2 / 64)
    med, lo, hi, cov = median_interval(list(range(10)))
    assert (lo, hi) == (1, 8) and cov == pytest.approx(1 - 2 * 11 / 1024)  # X_(2), X_(9)
    med, lo, hi, cov = median_interval([2.0, 1.0, 3.0, 4.0])  # too few for 95%: the range, 87.5%
    assert (lo, hi) == (1.0, 4.0) and cov == pytest.approx(0.875)
    assert list(kept(7, 1)) == [1, 2, 3, 4, 5, 6] and list(kept(1, 1)) == [0]



@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 5), st.integers(1, 4))
def test_copies_like_another_repetition_equal_copies_built_anew(seed, n_workers, n_dispatchers):
    """Copies of another repetition (the same seqs per worker, other service times) reuse the
    positions and blocks and equal the copies built from scratch, field by field."""
    rng = np.random.default_rng(seed)
    seqs = np.sort(rng.choice(10**4, 300, replace=False))
    sizes = rng.integers(100, 300, len(seqs))
    routed = {w: np.sort(rng.choice(seqs, rng.integers(0, 120), replace=False)) for w in range(n_workers)}
    routed[0] = np.append(routed[0], 10**5)  # a seq outside the measured part is not a copy
    first = Copies.of(seqs, sizes, {w: (s, rng.random(len(s))) for w, s in routed.items()}, n_dispatchers)
    first.blocks(7, n_dispatchers)
    other = {w: (s, rng.random(len(s))) for w, s in routed.items()}
    got, want = Copies.of(seqs, sizes, other, n_dispatchers, like=first), Copies.of(seqs, sizes, other, n_dispatchers)
    for name in ("pos", "worker", "nbytes", "dispatcher", "service_s"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    for a, b in zip(got.blocks(7, n_dispatchers), want.blocks(7, n_dispatchers)):
        np.testing.assert_array_equal(a, b)
    assert got._blocks is first._blocks  # shared: the blocks do not depend on the service times
