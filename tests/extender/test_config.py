import pytest

from loadwise.extender.cli import build_parser, main, overrides_from
from loadwise.extender.config import ConfigError, load_settings


def test_defaults():
    s = load_settings(None, {"source.url": "http://127.0.0.1:2020"})
    assert s.host_port == ("127.0.0.1", 8888) and s.policy == "least-used"
    assert s.filter.thresholds == {"cpu": 90.0, "memory": 90.0}
    assert not s.events_enabled


def test_file_then_flags(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "listen: 0.0.0.0:9000\npolicy: target-load-packing\n"
        "policy_args: {targetUtilization: 60, defaultRequestsMultiplier: 2}\n"
        "source: {kind: load-watcher, url: 'http://lw:2020', refresh_seconds: 15}\n"
        "kubeconfig: /etc/k\n"
    )
    ns = build_parser().parse_args(["--config", str(cfg), "--listen", "127.0.0.1:8001"])
    s = load_settings(ns.config, overrides_from(ns))
    assert s.listen == "127.0.0.1:8001" and s.source.refresh_seconds == 15
    assert s.tlp_args().requests_multiplier == 2.0 and s.tlp_args().target_utilization == 60
    assert s.events_enabled  # on by default with a kubeconfig


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "source: {refresh_seconds: soon}",
            "Expected `float`, got `str` - at `$.source.refresh_seconds`",
        ),
        ("polcy: least-used", "unknown field `polcy`"),
        ("policy: fastest", "unknown policy 'fastest'"),
        ("source: {kind: load-watcher}", "source.url is required"),
        ("source: {kind: file}", "source.file is required"),
        ("source: {kind: metrics-server}", "needs a kubeconfig"),
        ("source: {kind: snmp}", "Invalid enum value 'snmp' - at `$.source.kind`"),
        ("filter: {thresholds: {cpu: 150}}", "filter.thresholds.cpu: must be in (0, 100]"),
        ("filter: {thresholds: {gpu: 50}}", "unknown resource 'gpu'"),
        ("listen: localhost", "listen: expected HOST:PORT"),
        ("- a\n- b", "expected a mapping"),
        ("{", "is not YAML"),
    ],
)
def test_bad_config_fails_with_the_key_named(tmp_path, text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        text
        + (
            "\nsource: {url: 'http://x'}"
            if "source" not in text and text != "{" and not text.startswith("-")
            else ""
        )
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert message in str(info.value)


def test_the_policy_is_parsed_once_on_load_and_kept():
    from loadwise.extender.policies import POLICY_NAMES, LeastUsed

    s = load_settings(
        None,
        {
            "source.kind": "file",
            "source.file": "/dev/null",
            "policy_args": {"resources": {"cpu": 2}},
            "estimator.spread_weight": 0.25,
        },
    )
    assert s.scoring is s.scoring  # the one parse, not one per reader
    assert isinstance(s.scoring.policy, LeastUsed)
    assert s.scoring.policy.weights == {"cpu": 2.0} and s.scoring.policy.spread_weight == 0.25
    assert s.scoring.policy.peak_sigmas == 1.0  # estimator.peak_sigmas' default
    assert s.tlp_args() is s.scoring.tlp
    # the CLI offers exactly the registry's names
    (policy,) = [a for a in build_parser()._actions if a.dest == "policy"]
    assert tuple(policy.choices or ()) == POLICY_NAMES


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"resources": {"gpu": 1}}, "policy_args.resources: unknown resource(s) ['gpu']"),
        ({"targetUtilization": 50}, "policy least-used: unknown policy_args ['targetUtilization']"),
    ],
)
def test_bad_policy_arguments_fail_at_load_with_the_argument_named(args, message):
    with pytest.raises(ConfigError) as info:
        load_settings(
            None, {"source.kind": "file", "source.file": "/dev/null", "policy_args": args}
        )
    assert message in str(info.value)


def test_cli_reports_config_errors_and_exits_2(tmp_path, capsys):
    assert main(["--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read config" in capsys.readouterr().err
    assert main(["--policy", "least-used"]) == 2  # load-watcher source without a URL
    assert "source.url is required" in capsys.readouterr().err


def test_source_flags_are_exclusive(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--watcher-url", "http://a", "--load-file", "b"])


def test_cli_reports_an_unloadable_kubeconfig_and_exits_3(tmp_path, capsys):
    missing = tmp_path / "no-such-kubeconfig"
    assert main(["--load-file", "/dev/null", "--kubeconfig", str(missing)]) == 3
    assert "cannot load kubeconfig" in capsys.readouterr().err


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "3  the kubeconfig cannot be loaded" in out


def test_every_error_is_a_loadwise_error():
    from loadwise.extender import exceptions
    from loadwise.extender.config import ConfigError as FromConfig
    from loadwise.extender.kubeapi import KubeError as FromKubeapi
    from loadwise.extender.policies import PolicyError as FromPolicies
    from loadwise.extender.quantity import QuantityError as FromQuantity
    from loadwise.extender.sources import SourceError as FromSources
    from loadwise.extender.wire import WireError as FromWire

    for cls in (FromConfig, FromKubeapi, FromPolicies, FromQuantity, FromSources, FromWire):
        assert issubclass(cls, exceptions.LoadwiseError)
        assert getattr(exceptions, cls.__name__) is cls
    assert issubclass(exceptions.PolicyError, exceptions.ConfigError)
    for bad_input in (FromConfig, FromQuantity, FromWire):
        assert issubclass(bad_input, ValueError)
    assert exceptions.KubeError("x", 410).status == 410


def test_peak_sigmas_reaches_least_used_only_and_a_bad_one_is_named():
    from loadwise.extender.policies import LeastUsed, LoadVariationRiskBalancing

    base = {"source.kind": "file", "source.file": "/dev/null"}
    two = load_settings(None, {**base, "estimator.peak_sigmas": 2})
    assert isinstance(two.scoring.policy, LeastUsed) and two.scoring.policy.peak_sigmas == 2.0
    # load-variation risk balancing weighs the deviation by its own arguments (Trimaran's)
    lvrb = load_settings(
        None, {**base, "estimator.peak_sigmas": 2, "policy": "load-variation-risk-balancing"}
    )
    assert isinstance(lvrb.scoring.policy, LoadVariationRiskBalancing)
    for bad in (-0.5, 3.5):
        with pytest.raises(ConfigError) as info:
            load_settings(None, {**base, "estimator.peak_sigmas": bad})
        assert "estimator.peak_sigmas must be in [0, 3]" in str(info.value)
