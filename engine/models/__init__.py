"""Where a draft/verifier pair comes from and how it is loaded.

``presets`` names the pairs that work offline, ``gguf_cache`` converts GGUF
checkpoints once, ``qwen_parts`` assembles the optional qwen-coder pair,
``shared_draft`` loads drafts that borrow the verifier's embedding,
``cpu_linear`` picks the CPU matmul kernel, ``pair`` loads and checks a pair, and
``shapes`` builds pairs of real architectures' shapes with random weights (nothing to download).
"""
