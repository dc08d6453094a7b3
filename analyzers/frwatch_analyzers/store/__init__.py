"""A job attempt's files in the object store (or a local folder): the key layout (``layout``), listing and
reading them (``sources``), and the records the operator and agents write there: ``manifest.json``
(``manifest``), ``pods/<pod>.json`` (``pod_record``), ``nodes/<node>.json`` (``node_record``), read
leniently (``lenient``).

May import: ``base`` and ``verdict``. Beside ``decode`` (neither imports the other)."""
