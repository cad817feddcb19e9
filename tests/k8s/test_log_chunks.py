"""The pod's log comes in chunks streamed from the API server, never loaded whole."""

from __future__ import annotations

from test_kubernetes_backend import launch_all, name_of, running

from tests.support.fake_cluster import FakeCluster


def test_log_chunks_stream_the_pods_log_in_chunks(k8s, cluster: FakeCluster):
    refs = launch_all(k8s)
    name = name_of(refs[0])
    assert list(k8s.log_chunks(refs[0], "stdout")) == []  # still pending: no log yet
    cluster.set_status(name, running("10.1.2.3", "node-a"))
    cluster.logs[name] = b"".join(b"line %d\n" % i for i in range(1000))
    chunks = list(k8s.log_chunks(refs[0], "stdout", chunk_bytes=1000))
    assert b"".join(chunks) == cluster.logs[name]
    assert len(chunks) > 1 and max(len(chunk) for chunk in chunks) <= 1000
    assert list(k8s.log_chunks(refs[0], "stderr")) == []  # both streams come as stdout
