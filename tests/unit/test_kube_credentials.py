"""Credentials in the ecosystem's order (controller-runtime's ``loadConfig``): ``--kubeconfig``,
then ``$KUBECONFIG``, then in-cluster, then ``~/.kube/config``; ``--context``; the default
namespace of a context (``controller.operator.kube.credentials``).

Each case writes real kubeconfig files (each naming a server of its own, so the one chosen is
visible in the Configuration's ``host``) and, for in-cluster, a fake Pod: the service host and
port variables and a ServiceAccount directory with a token, a CA and a namespace file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from controller.operator.kube import (
    CredentialsError,
    authorization,
    default_namespace,
    load_configuration,
)
from controller.operator.kube.credentials import Source, choose_source


def kubeconfig(
    path: Path, *contexts: tuple[str, str, str | None], current: str | None = None
) -> str:
    """A kubeconfig with one cluster and token user per context ``(name, server, namespace)``."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s, _ in contexts],
        "users": [{"name": n, "user": {"token": f"token-{n}"}} for n, _, _ in contexts],
        "contexts": [
            {"name": n, "context": {"cluster": n, "user": n, **({"namespace": ns} if ns else {})}}
            for n, _, ns in contexts
        ],
        "current-context": current or contexts[0][0],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, object]:
    """Every source present at once: an explicit file, $KUBECONFIG, a Pod, ~/.kube/config."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    kubeconfig(home / ".kube" / "config", ("home", "https://home.test:6443", "home-ns"))
    pod = tmp_path / "serviceaccount"
    pod.mkdir()
    (pod / "token").write_text("pod-token")
    (pod / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (pod / "namespace").write_text("pod-ns\n")
    env = {
        "HOME": str(home),
        "KUBECONFIG": kubeconfig(tmp_path / "env.yaml", ("env", "https://env.test:6443", "env-ns")),
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    flag = kubeconfig(
        tmp_path / "flag.yaml",
        ("flag", "https://flag.test:6443", "flag-ns"),
        ("other", "https://other.test:6443", None),
    )
    return {"env": env, "pod": pod, "flag": flag, "home": home}


def host(world: dict[str, object], flag: str | None = None, context: str | None = None) -> str:
    env = world["env"]
    assert isinstance(env, dict)
    pod = world["pod"]
    assert isinstance(pod, Path)
    return str(load_configuration(flag, context, environ=env, service_account=pod).host)


def drop(world: dict[str, object], *keys: str) -> None:
    env = world["env"]
    assert isinstance(env, dict)
    for key in keys:
        env.pop(key)


def test_an_explicit_kubeconfig_wins_over_everything_else_even_in_a_pod(
    world: dict[str, object],
) -> None:
    assert host(world, str(world["flag"])) == "https://flag.test:6443"


def test_kubeconfig_variable_comes_next_and_wins_over_the_pod(world: dict[str, object]) -> None:
    assert host(world) == "https://env.test:6443"


def test_in_a_pod_without_a_kubeconfig_the_service_account_is_used(
    world: dict[str, object],
) -> None:
    drop(world, "KUBECONFIG")
    env, pod = world["env"], world["pod"]
    assert isinstance(env, dict) and isinstance(pod, Path)
    configuration = load_configuration(None, environ=env, service_account=pod)
    assert configuration.host == "https://10.96.0.1:443"
    assert authorization(configuration) == "Bearer pod-token"
    assert configuration.ssl_ca_cert == str(Path(str(world["pod"])) / "ca.crt")


def test_the_home_kubeconfig_is_the_last_resort(world: dict[str, object]) -> None:
    drop(world, "KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    assert host(world) == "https://home.test:6443"


def test_pod_variables_without_a_token_file_are_not_a_pod(world: dict[str, object]) -> None:
    drop(world, "KUBECONFIG")
    (Path(str(world["pod"])) / "token").unlink()
    assert host(world) == "https://home.test:6443"


def test_nothing_at_all_is_one_line_naming_every_place(
    world: dict[str, object], tmp_path: Path
) -> None:
    drop(world, "KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    (Path(str(world["home"])) / ".kube" / "config").unlink()
    with pytest.raises(CredentialsError) as caught:
        host(world)
    message = str(caught.value)
    assert "\n" not in message
    assert "--kubeconfig" in message and "$KUBECONFIG" in message and "Pod" in message
    assert str(Path(str(world["home"])) / ".kube" / "config") in message


def test_context_picks_another_context_of_the_file(world: dict[str, object]) -> None:
    assert host(world, str(world["flag"]), "other") == "https://other.test:6443"


def test_context_applies_to_the_kubeconfig_variable_too(
    world: dict[str, object], tmp_path: Path
) -> None:
    env = world["env"]
    assert isinstance(env, dict)
    env["KUBECONFIG"] = kubeconfig(
        tmp_path / "two.yaml", ("a", "https://a.test:1", None), ("b", "https://b.test:2", None)
    )
    assert host(world, None, "b") == "https://b.test:2"


def test_an_unknown_context_is_one_line(world: dict[str, object]) -> None:
    with pytest.raises(CredentialsError) as caught:
        host(world, str(world["flag"]), "nope")
    assert "nope" in str(caught.value) and "\n" not in str(caught.value)


def test_kubeconfig_variable_lists_several_files_merged_as_kubectl_does(
    world: dict[str, object], tmp_path: Path
) -> None:
    first = kubeconfig(tmp_path / "first.yaml", ("first", "https://first.test:1", None))
    second = kubeconfig(tmp_path / "second.yaml", ("second", "https://second.test:2", "two"))
    env = world["env"]
    assert isinstance(env, dict)
    env["KUBECONFIG"] = f"{first}:{second}"
    assert host(world, None, "second") == "https://second.test:2"
    assert host(world, None, "first") == "https://first.test:1"


def test_a_missing_explicit_file_is_one_line_and_does_not_fall_back(
    world: dict[str, object], tmp_path: Path
) -> None:
    with pytest.raises(CredentialsError) as caught:
        host(world, str(tmp_path / "absent.yaml"))
    assert "absent.yaml" in str(caught.value)


@pytest.mark.parametrize(
    ("flag", "context", "unset", "expected"),
    [
        pytest.param(True, None, (), "flag-ns", id="explicit-file-current-context"),
        pytest.param(True, "other", (), "default", id="context-without-namespace"),
        pytest.param(False, None, (), "env-ns", id="kubeconfig-variable"),
        pytest.param(False, None, ("KUBECONFIG",), "pod-ns", id="in-cluster-namespace-file"),
        pytest.param(False, None, ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"), "home-ns", id="home"),
    ],
)
def test_default_namespace_follows_the_chosen_source(
    world: dict[str, object],
    flag: bool,
    context: str | None,
    unset: tuple[str, ...],
    expected: str,
) -> None:
    drop(world, *unset)
    env = world["env"]
    assert isinstance(env, dict)
    pod = world["pod"]
    assert isinstance(pod, Path)
    given = str(world["flag"]) if flag else None
    assert default_namespace(given, context, environ=env, service_account=pod) == expected


def test_a_pod_without_a_namespace_file_acts_in_default(world: dict[str, object]) -> None:
    drop(world, "KUBECONFIG")
    pod = world["pod"]
    assert isinstance(pod, Path)
    (pod / "namespace").unlink()
    env = world["env"]
    assert isinstance(env, dict)
    assert default_namespace(None, environ=env, service_account=pod) == "default"
    assert choose_source(None, environ=env, service_account=pod).kind == "in-cluster"


def test_a_pod_namespace_file_is_read_without_its_whitespace_and_empty_means_default(
    world: dict[str, object],
) -> None:
    drop(world, "KUBECONFIG")
    pod = world["pod"]
    assert isinstance(pod, Path)
    env = world["env"]
    assert isinstance(env, dict)
    (pod / "namespace").write_text("  team-a \n")
    assert default_namespace(None, environ=env, service_account=pod) == "team-a"
    (pod / "namespace").write_text(" \n")
    assert default_namespace(None, environ=env, service_account=pod) == "default"


def test_an_unreadable_kubeconfig_is_one_bounded_line_naming_the_file(
    world: dict[str, object], tmp_path: Path
) -> None:
    """A kubeconfig that is not YAML: the parser's message (several lines, quoting the file)
    is one line of at most 300 characters after the file's name, for loading and for the
    default namespace alike."""
    deep = tmp_path / ("d" * 200) / ("e" * 200)  # the parser quotes the file's path
    deep.mkdir(parents=True)
    broken = deep / "broken.yaml"
    broken.write_text("clusters: [\n  - {name: a\n\nusers: :\n")
    for call in (
        host,
        lambda w, f: default_namespace(f, environ=w["env"], service_account=w["pod"]),
    ):
        with pytest.raises(CredentialsError) as caught:
            call(world, str(broken))
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"{broken}: ")
        detail = message.removeprefix(f"{broken}: ")
        assert len(detail) == 300 and detail.endswith("...")


def test_one_line_keeps_a_message_of_the_bound_whole() -> None:
    from controller.operator.kube.credentials import _one_line

    exactly = "y" * 299 + "z"
    assert _one_line(exactly) == exactly
    assert _one_line(exactly + "!") == "y" * 297 + "..."
    assert _one_line("a\n  b\tc ") == "a b c"


def test_context_applies_to_the_home_kubeconfig_too(world: dict[str, object]) -> None:
    drop(world, "KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    home = Path(str(world["home"])) / ".kube" / "config"
    kubeconfig(
        home, ("home", "https://home.test:6443", None), ("lab", "https://lab.test:6443", None)
    )
    assert host(world, None, "lab") == "https://lab.test:6443"


def test_the_chosen_source_says_what_it_is(world: dict[str, object], tmp_path: Path) -> None:
    """``Source.kind`` is ``kubeconfig`` for each of the three files and ``in-cluster`` for
    the Pod (what ``load_configuration`` branches on)."""
    env = world["env"]
    assert isinstance(env, dict)
    pod = world["pod"]
    assert isinstance(pod, Path)
    flag = str(world["flag"])
    home = str(Path(str(world["home"])) / ".kube" / "config")

    def chosen(given: str | None) -> object:
        return choose_source(given, "ctx", environ=env, service_account=pod)

    assert chosen(flag) == Source("kubeconfig", flag, "ctx")
    assert chosen(None) == Source("kubeconfig", env["KUBECONFIG"], "ctx")
    drop(world, "KUBECONFIG")
    assert chosen(None) == Source("in-cluster")
    drop(world, "KUBERNETES_SERVICE_HOST")
    assert chosen(None) == Source("kubeconfig", home, "ctx")


def test_an_unusable_service_account_is_one_line_saying_in_cluster(
    world: dict[str, object],
) -> None:
    drop(world, "KUBECONFIG")
    (Path(str(world["pod"])) / "ca.crt").unlink()
    with pytest.raises(CredentialsError) as caught:
        host(world)
    message = str(caught.value)
    assert message.startswith("in-cluster: ") and "\n" not in message
