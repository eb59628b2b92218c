"""The operator's own client sends the token its credentials hold
(``controller/operator/kube/client.py``, ``credentials.py``).

In a Pod, the token file is read as client-go's ``rest.InClusterConfig`` and
``transport.NewCachedFileTokenSource`` read it (k8s.io/client-go v0.36.3): ``Bearer`` and the
file's content without its whitespace, read again once its minute less the 10 s leeway is up, a
failed re-read keeping the token read last, and the host joined as ``net.JoinHostPort`` joins
it (an IPv6 address in brackets). The kubernetes client's loader stores a kubeconfig's token
under ``BearerToken``; reading only ``authorization`` once sent no token at all in-cluster
(every write anonymous) — this pins the header."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from controller.operator.kube import CredentialsError, authorization
from controller.operator.kube.credentials import TOKEN_REREAD_SECONDS, InClusterConfiguration

POD = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}


def service_account(tmp_path: Path, token: str = "first\n") -> Path:
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text("not checked here")
    return tmp_path


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_in_cluster_token_is_sent_and_a_rotated_file_is_read_again_after_50s(
    tmp_path: Path,
) -> None:
    clock = Clock()
    configuration = InClusterConfiguration(POD, service_account(tmp_path), clock)
    assert configuration.host == "https://127.0.0.1:6443"
    assert authorization(configuration) == "Bearer first"
    (tmp_path / "token").write_text("second")
    clock.now = 49.9  # client-go: cached for a minute less its 10 s leeway
    assert authorization(configuration) == "Bearer first"
    clock.now = 50.0
    assert TOKEN_REREAD_SECONDS == 50.0
    assert authorization(configuration) == "Bearer second"


def test_a_token_file_gone_at_a_re_read_keeps_the_last_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kubelet replaces a projected token's file by a symlink swap; a read that fails
    in between must not turn every request anonymous (client-go's ``cachingTokenSource``
    returns the token it had)."""
    clock = Clock()
    configuration = InClusterConfiguration(POD, service_account(tmp_path), clock)
    (tmp_path / "token").unlink()
    clock.now = 60.0
    assert authorization(configuration) == "Bearer first"
    assert "could not read the rotated token" in caplog.text
    (tmp_path / "token").write_text("third")
    clock.now = 120.0
    assert authorization(configuration) == "Bearer third"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({"token": "  \n", "ca.crt": "x"}, "is empty", id="empty-token"),
        pytest.param({"token": "t"}, "no CA certificate", id="no-ca"),
    ],
)
def test_an_unusable_pod_is_one_line(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(CredentialsError) as caught:
        InClusterConfiguration(POD, tmp_path)
    assert str(caught.value).startswith("in-cluster: ") and expected in str(caught.value)


def test_an_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    pod = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert InClusterConfiguration(pod, service_account(tmp_path)).host == "https://[fd00::1]:443"


def test_the_operator_in_a_pod_never_imports_the_kubernetes_client(tmp_path: Path) -> None:
    """``orca run``'s modules, kopf among them, and a Pod's credentials leave ``kubernetes``
    unimported (its generated models: 9 MB resident); a kubeconfig still loads it afterwards."""
    sa = service_account(tmp_path)
    script = (
        "import sys, pathlib\n"
        "import controller.cli.run, controller.operator.app as app\n"
        "from controller.operator.kube import load_configuration\n"
        f"c = load_configuration(environ={POD!r}, service_account=pathlib.Path({str(sa)!r}))\n"
        "app.connection_info(c)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
        "import kubernetes.config\n"
        "print('kubernetes' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.splitlines() == ["[]", "True"], out.stderr


def test_client_certificates_send_no_authorization_header() -> None:
    assert authorization(k8s_client.Configuration()) is None


def test_a_configuration_with_the_older_authorization_key_still_sends_its_token() -> None:
    """A Configuration built by hand as the kubernetes client's generated API docs show it
    ("Configure API key authorization: BearerToken"): the token under
    ``api_key["authorization"]``, its prefix under ``api_key_prefix["authorization"]``. The
    loaders store under ``BearerToken`` only; ``authorization`` reads the older key when
    that one is absent, so such a Configuration still authenticates."""
    configuration = k8s_client.Configuration()
    configuration.api_key["authorization"] = "older"
    configuration.api_key_prefix["authorization"] = "Bearer"
    assert authorization(configuration) == "Bearer older"
