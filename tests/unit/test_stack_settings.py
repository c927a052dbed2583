"""The local stack's broker count: addresses, replicas and what ``up`` recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from rllm.errors import ConfigError
from rllm.settings import KafkaSettings, StackSettings


def test_one_broker_is_the_default(tmp_path: Path) -> None:
    stack = StackSettings(home=tmp_path, kafka_port=9100)
    assert (stack.brokers, stack.replication_factor) == (1, 1)
    assert stack.bootstrap_servers == "127.0.0.1:9100"
    assert stack.kafka_data_dir == tmp_path / "kafka"


def test_three_brokers_listen_two_ports_apart_with_three_replicas(tmp_path: Path) -> None:
    stack = StackSettings(home=tmp_path, kafka_port=9100, kafka_brokers=3)
    assert stack.bootstrap_servers == "127.0.0.1:9100,127.0.0.1:9102,127.0.0.1:9104"
    assert (stack.replication_factor, stack.kafka_data_dir) == (3, tmp_path / "kafka-cluster")
    assert StackSettings(home=tmp_path, kafka_brokers=5).replication_factor == 3


def test_the_count_up_recorded_is_used_unless_given(tmp_path: Path) -> None:
    (tmp_path / "kafka-brokers").write_text("3\n")
    assert StackSettings(home=tmp_path).brokers == 3
    assert StackSettings(home=tmp_path, kafka_brokers=1).brokers == 1
    (tmp_path / "kafka-brokers").write_text("many\n")
    with pytest.raises(ConfigError, match=r"kafka-brokers holds 'many', not a broker count"):
        _ = StackSettings(home=tmp_path).brokers


def test_min_insync_is_one_fewer_than_the_replicas_unless_set() -> None:
    assert KafkaSettings().min_insync == 1
    assert KafkaSettings(replication_factor=3).min_insync == 2
    assert KafkaSettings(replication_factor=3, min_insync_replicas=3).min_insync == 3
    with pytest.raises(ConfigError, match="RLLM_MIN_INSYNC_REPLICAS=4 is more than"):
        _ = KafkaSettings(replication_factor=3, min_insync_replicas=4).min_insync


def test_the_home_is_private_to_its_owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import stat

    from click.testing import CliRunner

    from rllm.cli.main import cli
    from rllm.settings import private_home

    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert stat.S_IMODE(private_home(shared).stat().st_mode) == 0o700
    fresh = tmp_path / "fresh" / ".rllm"
    monkeypatch.setenv("RLLM_HOME", str(fresh))
    result = CliRunner().invoke(cli, ["bench", "list"])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700  # any command makes it 0700
