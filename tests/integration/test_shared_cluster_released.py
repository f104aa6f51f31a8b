"""The plugin stops the session's shared cluster after the last test that can use it (ranked last in
``tests/integration/conftest.py``, after every such test): it must not stay idle under the KRaft modules."""

import psutil
import pytest

from chaos.pytest_plugin import SHARED


def test_the_shared_cluster_is_stopped_after_the_last_test_that_can_use_it(request):
    shared = request.config.stash.get(SHARED, None)
    if shared is None:
        pytest.skip("no test of this session started the shared cluster (run with the suite)")
    assert shared.cluster.session is not None
    where = str(shared.cluster.session.dir)
    assert not shared.cluster.session.dir.exists(), f"the shared cluster's directory {where} is still there"
    # each node was started with its configuration in that directory: none of them may be left
    left = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(where in arg for arg in p.info["cmdline"] or ()):
            left.append((p.info["pid"], " ".join(p.info["cmdline"])[:120]))
    assert not left, left
    assert not shared.cluster.processes()
