from agents.lanes.host_cpu import default_thread_counts, matmul_rows, triad_rows


def test_triad_counts_stream_bytes_and_reports_positive_bandwidth():
    rows = triad_rows(1 << 16, 2, (1, 2))
    assert rows and all(r["bench"] == "triad" and r["unit"] == "GB/s" and r["value"] > 0 for r in rows)
    assert all(r["value"] >= r["median"] for r in rows)  # best of the repeats is never below the median


def test_matmul_scales_over_the_given_thread_counts():
    rows = matmul_rows(64, 2, (1, 2))
    assert [r["threads"] for r in rows] == [1, 2]
    assert all(r["unit"] == "GFLOP/s" and r["value"] > 0 for r in rows)


def test_thread_counts_end_at_the_core_count():
    counts = default_thread_counts()
    assert counts[0] == 1 and counts == tuple(sorted(set(counts)))
