"""A real kube-apiserver + etcd on loopback, for development and tests (envtest in Python)."""
