"""The operator's own client sends the token the kubernetes loaders found
(``controller/operator/kube/client.py``).

The loaders store tokens under ``BearerToken``; reading only ``authorization`` sent no token at
all in-cluster (every write anonymous) — this pins the header and the rotated-file re-read."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.config.incluster_config import InClusterConfigLoader

from controller.operator.kube import authorization


def test_in_cluster_token_is_sent_and_a_rotated_file_is_read_again(tmp_path: Path) -> None:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("first")
    ca.write_text("not checked here")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}
    new_loader: Any = InClusterConfigLoader  # not annotated upstream
    loader = new_loader(str(token), str(ca), environ=env)
    configuration = k8s_client.Configuration()
    loader.load_and_set(configuration)
    assert authorization(configuration) == "bearer first"
    token.write_text("second")
    loader.token_expires_at = datetime.datetime.now()  # the loader's 1-minute re-read is due
    assert authorization(configuration) == "bearer second"


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
