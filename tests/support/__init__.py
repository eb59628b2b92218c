"""What the tests share, none of it a test: ``factories`` (Nodes and Workloads as the API
returns them and as users write them), ``fakeapi`` (an API server in the test's event loop),
``harness`` (the operator as a process against the real control plane, the cluster through
kubectl), ``cli`` (the command line's input files), ``oracles`` (the property tests' rules,
written without the code they check), ``properties`` (hypothesis profiles) and
``imagebuild`` (the image, built once per session). Fixtures live in the ``conftest.py``
files."""
