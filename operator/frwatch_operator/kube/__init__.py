"""The Kubernetes adapter: ``adapter`` (:class:`~frwatch_operator.kube.adapter.Kube`, the one object the
domain talks to), ``api_errors`` (API errors in frwatch's words, the one translation every adapter uses) and
``ports`` (the small interface the analysis and remediation steps need, so they can be fed a fake).

An adapter: may import the shared base and the pure data it reads and writes (``kinds``, ``incident``,
``detect``, ``capture.gaps``); never the steps above it nor the shell.
"""
