"""benchmarks/cluster_side.py runs (so `make bench` cannot silently rot) and measures what it
says: with the watch, every pod's three updates bind it to a node the answers named."""

from benchmarks import cluster_side


def test_a_small_run_prints_every_configuration(capsys):
    assert cluster_side.main(["--nodes", "5", "--pods", "40", "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    for config in cluster_side.CONFIGS:
        assert f"  {config} " in out, out
    assert out.count("round ") == 2


async def test_the_watch_config_binds_every_pod_on_a_node_named_in_the_answer(monkeypatch):
    names = [f"n{i}" for i in range(4)]
    containers = cluster_side._pods(12, cluster_side.random.Random(3))
    seen = []
    real = cluster_side.ClusterWatch._pod_event

    def spy(self, kind, pod):  # type: ignore[no-untyped-def]
        seen.append(pod.spec.nodeName)
        return real(self, kind, pod)

    monkeypatch.setattr(cluster_side.ClusterWatch, "_pod_event", spy)
    assert (
        await cluster_side._run(
            "+watch", names, containers, cluster_side._bodies(names, containers), 3
        )
        > 0
    )
    assert len(seen) == 3 * 12 and set(seen) <= set(names)
