"""Pure: Grafana on the head (spark-llm:monitoring.grafanaImage, off unless set): the stack's dashboard
(dashboard.py) provisioned with the stack's Prometheus as its datasource, on the head's port grafanaPort.

Its login is the stack's (user spark-llm, spark-llm:monitoringPassword), as Prometheus's is, and its datasource
reads the same password: both from one 0600 file a secret step writes on the head (Grafana's `__FILE` settings and
`$__file{}` in provisioning), so the password is in no container's environment, no command line and no other file.
Grafana runs as root in its container to read that file (as Alertmanager reads its config), with no anonymous
access, no sign-up and nothing sent out (no update checks, no usage reports: the head may have no internet). Its
files are written by a step and mounted read-only; a change to them (a model added: the dashboard's panels) replaces
the container, since Grafana reads its datasources at start only. Its own data (users' edits, sessions) is in a
volume kept across restarts and `pulumi destroy`, as Prometheus's is.

Not run on the sim (no Grafana image there): the unit tests check what the stack declares.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass

from spark_llm.config.monitoring import WEB_USER
from spark_llm.plan.monitoring.dashboard import (
    CONTAINER_DASHBOARDS,
    DASHBOARD_FILE,
    DATASOURCE_FILE,
    PROVIDER_FILE,
    datasource_file,
    provider_file,
)
from spark_llm.plan.node_files import file_script

CONTAINER = "spark-llm-grafana"
DATA_VOLUME = "spark-llm-grafana-data"
CONTAINER_DATA = "/var/lib/grafana"
CONTAINER_PROVISIONING = "/etc/grafana/provisioning"
CONTAINER_SECRET_DIR = "/run/spark-llm/grafana"
PASSWORD_NAME = "password"


@dataclass(frozen=True)
class GrafanaPlan:
    image: str
    port: int
    directory: str
    """Its files on the head: `provisioning/`, `dashboards/`, `secret/`."""
    dashboard_text: str
    datasource_text: str
    provider_text: str

    @property
    def secret_dir(self) -> str:
        return f"{self.directory}/secret"

    @property
    def files(self) -> dict[str, str]:
        """Each file under the directory, by its path there."""
        return {
            f"provisioning/datasources/{DATASOURCE_FILE}": self.datasource_text,
            f"provisioning/dashboards/{PROVIDER_FILE}": self.provider_text,
            f"dashboards/{DASHBOARD_FILE}": self.dashboard_text,
        }

    @property
    def env(self) -> dict[str, str]:
        """Grafana's settings (its GF_SECTION_KEY variables): nothing secret, the password read from its file."""
        password = f"{CONTAINER_SECRET_DIR}/{PASSWORD_NAME}"
        return {
            "GF_SERVER_HTTP_PORT": str(self.port),
            "GF_SECURITY_ADMIN_USER": WEB_USER,
            "GF_SECURITY_ADMIN_PASSWORD__FILE": password,
            "GF_AUTH_ANONYMOUS_ENABLED": "false",
            "GF_USERS_ALLOW_SIGN_UP": "false",
            "GF_ANALYTICS_REPORTING_ENABLED": "false",
            "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
            "GF_ANALYTICS_CHECK_FOR_PLUGIN_UPDATES": "false",
            "GF_PATHS_PROVISIONING": CONTAINER_PROVISIONING,
        }

    @property
    def mounts(self) -> tuple[tuple[str, str], ...]:
        """(on the head, in the container), read-only: the provisioning files, the dashboards, the password."""
        return (
            (f"{self.directory}/provisioning", CONTAINER_PROVISIONING),
            (f"{self.directory}/dashboards", CONTAINER_DASHBOARDS),
            (self.secret_dir, CONTAINER_SECRET_DIR),
        )

    @property
    def revision(self) -> str:
        """What replaces its container: the image, the settings, the mounts and the files' content (read at start)."""
        material = {"image": self.image, "env": self.env, "mounts": self.mounts, "files": self.files}
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]

    def files_script(self) -> str:
        """The head's files step: each file written by a rename and checked where it landed."""
        writes = "".join(file_script(f"{self.directory}/{path}", text, "0644") for path, text in self.files.items())
        return writes + f"echo 'monitoring: the files of Grafana written ({self.revision})'\n"

    def secret_script(self, password: str) -> str:
        """The head's secret step (it carries the password): the password file, 0600."""
        return (
            file_script(f"{self.secret_dir}/{PASSWORD_NAME}", password, "0600")
            + f"chmod 0700 {shlex.quote(self.secret_dir)}\n"
            + f"echo 'monitoring: the password file of Grafana written, 0600 (user {WEB_USER})'\n"
        )


def grafana_plan(image: str, port: int, directory: str, dashboard_of: dict, prometheus_port: int) -> GrafanaPlan:
    """Grafana on the head with the stack's dashboard (`dashboard_of`: dashboard.dashboard's JSON model), its
    datasource the head's Prometheus on loopback (both on the host's network), the password read from the secret
    step's file."""
    return GrafanaPlan(
        image=image,
        port=port,
        directory=directory,
        dashboard_text=json.dumps(dashboard_of, indent=2) + "\n",
        datasource_text=datasource_file(
            f"http://127.0.0.1:{prometheus_port}", f"$__file{{{CONTAINER_SECRET_DIR}/{PASSWORD_NAME}}}"
        ),
        provider_text=provider_file(),
    )
