"""The one access layer's error mapping and resource paths (the requests themselves run against a real API server in
tests/integration and tests/operator)."""

import json

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from ansible_collections.soperator.slurm.plugins.module_utils import names
from ansible_collections.soperator.slurm.plugins.module_utils.k8s import access


def refused(status, message="the server says no", reason="Reason"):
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "message": message, "details": {"causes": [{"field": "spec.x"}]}})
    return exc


@pytest.mark.parametrize("status, cls", [(400, access.Invalid), (422, access.Invalid), (401, access.Forbidden),
                                          (403, access.Forbidden), (404, access.NotFound), (409, access.Conflict),
                                          (429, access.Transient), (500, access.Transient),
                                          (503, access.Transient), (410, access.KubernetesError)])
def test_one_error_mapping_by_status(status, cls):
    err = access.error("apply ConfigMap ns/x", refused(status))
    assert type(err) is cls and isinstance(err, access.KubernetesError)
    assert err.msg == "apply ConfigMap ns/x: the server says no" and err.status == status
    assert err.server_message == "the server says no" and err.body["details"]["causes"] == [{"field": "spec.x"}]
    assert access.describe(err) == "(%d) the server says no" % status


def test_an_unreachable_api_is_transient_and_named():
    err = access.error("list Pod in ns", MaxRetryError(None, "/api", "connection refused"))
    assert isinstance(err, access.Transient) and err.status is None
    assert err.msg.startswith("list Pod in ns: cannot reach the Kubernetes API: ")


def test_call_maps_library_errors_and_lets_its_own_through():
    def fail(exc):
        raise exc
    with pytest.raises(access.NotFound):
        access.call("get x", fail, refused(404))
    own = access.Conflict("kept losing", status=409)
    with pytest.raises(access.Conflict) as info:
        access.call("get x", fail, own)
    assert info.value is own
    with pytest.raises(ZeroDivisionError):  # a bug is not an API error
        access.call("get x", lambda: 1 / 0)


def test_a_body_that_is_not_json_gives_the_reason():
    exc = ApiException(status=502, reason="Bad Gateway")
    exc.body = "<html>proxy</html>"
    err = access.error("get x", exc)
    assert err.msg == "get x: Bad Gateway" and err.body is None


def test_resource_paths():
    sts = access.resource("apps", "v1", "statefulsets", "StatefulSet")
    assert sts.path("ns") == "/apis/apps/v1/namespaces/ns/statefulsets"
    assert sts.path("ns", "demo-cpu") == "/apis/apps/v1/namespaces/ns/statefulsets/demo-cpu"
    assert sts.path() == "/apis/apps/v1/statefulsets" and sts.api_version == "apps/v1"
    pod = access.resource("", "v1", "pods", "Pod")
    assert pod.path("ns", "p", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    node = access.resource("", "v1", "nodes", "Node", namespaced=False)
    assert node.path("ignored", "n1") == "/api/v1/nodes/n1"


def test_the_operators_table_knows_every_kind_it_writes():
    table = access.table()
    for key in [(names.API_VERSION, names.CLUSTER_KIND), (names.API_VERSION, names.NODESET_KIND), ("v1", "Pod"),
                ("v1", "Event"), ("coordination.k8s.io/v1", "Lease"), ("apps/v1", "StatefulSet")]:
        assert key in table, key
    assert table[("v1", "Node")].namespaced is False
    assert table[(names.API_VERSION, names.NODESET_KIND)].path("ns", "cpu", "status") == (
        "/apis/slurm.soperator.dev/v1alpha1/namespaces/ns/nodesets/cpu/status")


def test_a_kind_not_served_is_none_or_not_found_when_required():
    api = access.Api(object(), resolve={})
    assert api.resource("example.com/v1", "Thing", required=False) is None and not api.served("example.com/v1",
                                                                                              "Thing")
    with pytest.raises(access.NotFound) as info:
        api.resource("example.com/v1", "Thing")
    assert "serves no Thing of apiVersion example.com/v1" in info.value.msg


@pytest.mark.parametrize("api_version, foreign", [
    ("v1", False), ("apps/v1", False), ("rbac.authorization.k8s.io/v1", False), ("slurm.soperator.dev/v1alpha1", False),
    ("monitoring.coreos.com/v1", True), ("k8s.mariadb.com/v1alpha1", True), ("example.invalid/v1", True)])
def test_only_other_projects_kinds_are_confirmed_with_the_server(api_version, foreign):
    # Their CRDs come and go (prometheus-operator uninstalled): a stale shared discovery cache must not be believed.
    assert access._foreign(api_version) is foreign


def test_an_optional_kind_not_served_is_asked_of_the_server_once_without_rediscovering_the_api():
    """The library's discovery rediscovers the whole API (and every group after it) on a kind it does not find:
    another project's kind is asked of its group version first."""
    from ansible_collections.soperator.slurm.plugins.module_utils import kinds

    class Dynamic:
        def __init__(self):
            self.resources, self.asked = self, []

        def request(self, method, path, **kwargs):
            self.asked.append((method, path))
            raise ApiException(status=404, reason="Not Found")

        def get(self, **kwargs):
            raise AssertionError("the library's discovery was asked: %s" % kwargs)

    dynamic = Dynamic()
    api = access.Api(dynamic)
    optional = [k for k in kinds.OWNED if k.optional]
    assert optional and not any(api.served(kinds.api_version(k), k.kind) for k in optional)
    assert not any(api.served(kinds.api_version(k), k.kind) for k in optional)  # remembered
    assert dynamic.asked == [("get", "/apis/%s" % kinds.api_version(k)) for k in optional]


def test_a_refused_exec_is_mapped_by_its_handshake_status():
    """An exec is a websocket: the API server's refusal comes as the handshake's status, mapped as any answer."""
    from websocket import WebSocketBadStatusException

    refusal = WebSocketBadStatusException("Handshake status 403 Forbidden", 403,
                                          resp_body=b'{"kind": "Status", "message": "pods \\"p\\" is forbidden"}')
    err = access.error("cannot exec in pod ns/p (container c)", refusal)
    assert type(err) is access.Forbidden and err.status == 403
    assert err.msg == 'cannot exec in pod ns/p (container c): pods "p" is forbidden'


class Recorded:
    """The requests an Api sends (its Rest's ``json``), each answered from a script: an object, or an error raised."""

    def __init__(self, *answers):
        self.answers, self.sent = list(answers), []

    def __call__(self, method, path, params=None, body=None, content_type=access.JSON, accept=access.JSON,
                 timeout=None, what=None):
        self.sent.append((method, path, body))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def nodeset(resource_version, finalizers):
    return {"apiVersion": names.API_VERSION, "kind": names.NODESET_KIND,
            "metadata": {"name": "cpu", "namespace": "hpc", "resourceVersion": resource_version,
                         "finalizers": finalizers}}


def test_finalizers_are_written_on_the_object_as_read_and_again_after_a_lost_race():
    """The one finalizer write: the list changed on the copy at hand, merge-patched conditional on its
    resourceVersion; a lost race reads the object again (another writer's finalizer is kept)."""
    api = access.Api(object(), resolve=access.table())
    path = "/apis/slurm.soperator.dev/v1alpha1/namespaces/hpc/nodesets/cpu"
    api.rest.json = sent = Recorded(access.Conflict("stale", status=409), nodeset("8", ["other", names.FINALIZER]),
                                    nodeset("9", ["other"]))
    assert api.remove_finalizer(nodeset("7", [names.FINALIZER]), names.FINALIZER) == nodeset("9", ["other"])
    assert sent.sent == [
        ("PATCH", path, {"metadata": {"finalizers": [], "resourceVersion": "7"}}),
        ("GET", path, None),
        ("PATCH", path, {"metadata": {"finalizers": ["other"], "resourceVersion": "8"}})]
    api.rest.json = sent = Recorded(nodeset("2", ["other", names.FINALIZER]))
    api.add_finalizer(nodeset("1", ["other"]), names.FINALIZER)
    assert sent.sent == [("PATCH", path, {"metadata": {"finalizers": ["other", names.FINALIZER],
                                                       "resourceVersion": "1"}})]


def test_a_finalizer_already_as_asked_costs_no_request_and_a_gone_object_is_none():
    api = access.Api(object(), resolve=access.table())
    api.rest.json = Recorded()
    obj = nodeset("1", [names.FINALIZER])
    assert api.add_finalizer(obj, names.FINALIZER) is obj and api.remove_finalizer(nodeset("1", []), "x") is not None
    api.rest.json = Recorded(access.NotFound("gone", status=404))
    assert api.add_finalizer(nodeset("1", []), names.FINALIZER) is None


def test_whether_a_resource_is_served_is_asked_of_its_group_version():
    api = access.Api(object(), resolve=access.table())
    api.rest.json = sent = Recorded({"resources": [{"name": "servicemonitors"}]}, access.NotFound("no", status=404))
    monitors = access.resource("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor")
    assert api.serves(monitors) and not api.serves(access.resource("", "v1", "widgets", "Widget"))
    assert [(m, p) for m, p, b in sent.sent] == [("GET", "/apis/monitoring.coreos.com/v1"), ("GET", "/api/v1")]
