"""Development support for frwatch, not part of the product: the local cluster (a Kubernetes API emulator
with a stand-in kubelet, Job controller and training operator), the failing torch workloads, the demo, the
Flight Recorder dump builder and the helpers the tests share.

The product packages (``frwatch_operator``, ``frwatch_analyzers``) never import it (an import-linter
contract in pyproject.toml), and the image does not contain it (the Dockerfile copies no ``dev/``).
"""
