import threading

import pytest

from evalhub.services.versions import model_version_register
from workers.model_server import model_server_create


@pytest.fixture
def serve_versions():
    """Registers versions behind real model servers (threads in this process) and points their
    serving_url at them: `serve_versions({"v3": checkpoint, "v4": checkpoint})` -> [v3, v4].
    `serve_versions.servers[label]` is the server, e.g. to stop a candidate mid-test."""
    servers = {}

    def serve(checkpoints: dict, *, family: str = "contract-assistant") -> list:
        versions = []
        for label, path in checkpoints.items():
            version = model_version_register(
                family=family,
                label=label,
                backend_kind="builtin",
                backend_config={"path": str(path)},
                actor=None,
            )
            server = model_server_create(version=version, port=0)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            version.serving_url = f"http://127.0.0.1:{server.server_port}/v1"
            version.save(update_fields=["serving_url"])
            servers[label] = server
            versions.append(version)
        return versions

    serve.servers = servers
    yield serve
    for server in servers.values():
        server.shutdown()
        server.server_close()
