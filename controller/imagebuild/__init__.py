"""The operator's image, built here without a container engine or a registry (``make image``):
Debian packages from a hashed lock (``debian``), the virtualenv from the Python locks
(``python``), a reproducible OCI archive (``oci``) and its SBOM (``sbom``); ``build`` puts
them together. ``oci`` also packs the pause image ``orca dev-cluster --with-kubelet`` needs."""
