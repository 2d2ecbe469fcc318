"""run_local_script: a script on this machine gets the same pinned ssh_config run_script uses (no node needed)."""

from __future__ import annotations

import pytest

from spark_llm.ssh import RemoteError, SshHost, run_local_script

HEAD = SshHost(
    name="spark-1",
    host="10.1.230.180",
    port=22,
    user="aurora",
    key_path="/keys/id_ed25519",
    host_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHeadHeadHeadHeadHeadHeadHeadHeadHeadHead1",
)


def test_local_script_gets_the_pinned_ssh_config_of_its_node():
    out = run_local_script(
        HEAD,
        'echo "host=$SPARK_LLM_SSH_HOST"\n'
        'grep -E "^ *(HostName|StrictHostKeyChecking|IdentityFile) " "$SPARK_LLM_SSH_CONFIG"\n'
        'cat "$(dirname "$SPARK_LLM_SSH_CONFIG")/known_hosts"\n',
        stream=False,
    )
    assert "host=spark-1" in out
    assert "HostName 10.1.230.180" in out and "StrictHostKeyChecking yes" in out
    assert "IdentityFile /keys/id_ed25519" in out and "ProxyJump" not in out
    assert f"spark-1 {HEAD.host_key}" in out


def test_failed_local_script_names_the_node_and_shows_its_last_lines():
    with pytest.raises(RemoteError, match=r"(?s)local script for spark-1 .*exit 3.*rsync: connection unexpectedly"):
        run_local_script(HEAD, "echo 'rsync: connection unexpectedly closed'\nexit 3\n", stream=False)
