"""The real kopf 1.45 operator framework against the emulator, end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kopf.testing import KopfRunner
from kubernetes import client
from kubernetes.client.rest import ApiException

from frwatch_dev.testing.polling import eventually

OPERATOR = str(Path(__file__).parent / "kopf_probe_operator.py")
GROUP, VERSION, PLURAL = "emulator.frwatch.io", "v1", "probes"

PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"kind": "Probe", "plural": PLURAL, "singular": "probe"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def test_a_real_kopf_operator_handles_create_update_and_delete(
    api_client: client.ApiClient, k8s_namespace: str
) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    if not any(
        c.metadata.name == PROBE_CRD["metadata"]["name"] for c in ext.list_custom_resource_definition().items
    ):
        ext.create_custom_resource_definition(PROBE_CRD)
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    args = (GROUP, VERSION, k8s_namespace, PLURAL)

    with KopfRunner(["run", "--standalone", "--namespace", k8s_namespace, OPERATOR], timeout=60) as runner:
        custom.create_namespaced_custom_object(
            *args,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Probe",
                "metadata": {"name": "p1"},
                "spec": {"value": 41},
            },
        )

        def handled() -> dict[str, Any] | None:
            obj = custom.get_namespaced_custom_object(*args, "p1")
            done = obj["metadata"].get("annotations", {}).get("frwatch.io/probed") == "41"
            return obj if done and obj.get("status", {}).get("phase") == "Seen" else None

        obj = eventually(handled, "annotate and set status.phase on create")
        assert obj["status"]["probe_created"] == {"echo": 41}  # the handler's result, in status
        assert obj["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
        events = eventually(
            lambda: (
                core.list_namespaced_event(
                    k8s_namespace, field_selector="involvedObject.name=p1,reason=Probed"
                ).items
            ),
            "post an Event",
        )
        assert events[0].message == "probe saw value 41"

        custom.patch_namespaced_custom_object(*args, "p1", {"spec": {"value": 42}})
        eventually(
            lambda: (
                custom.get_namespaced_custom_object(*args, "p1")["metadata"]["annotations"].get(
                    "frwatch.io/probed"
                )
                == "42"
            ),
            "annotate again on update",
        )

        custom.delete_namespaced_custom_object(*args, "p1")

        def gone() -> bool:
            try:
                custom.get_namespaced_custom_object(*args, "p1")
            except ApiException as exc:
                return exc.status == 404
            return False

        eventually(gone, "remove its finalizer so that the deletion completes")

    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output
    assert "Traceback" not in runner.output, runner.output
