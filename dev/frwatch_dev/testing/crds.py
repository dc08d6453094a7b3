"""CustomResourceDefinitions for the tests: created in the (shared) emulator once, whoever comes first."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml
from kubernetes import client


def ensure_crds(api: client.ApiClient, paths: Iterable[Path]) -> None:
    """Create the CRD of each YAML file in ``paths``; one already there (another test folder of this session
    made it) is left as it is."""
    ext = client.ApiextensionsV1Api(api)
    have = {crd.metadata.name for crd in ext.list_custom_resource_definition().items}
    for path in paths:
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] not in have:
            ext.create_custom_resource_definition(crd)
