"""The shared build cache on a Redis server: what a build takes from it and gives to it.

Terms:
- *remote*: the server in effect (``tribuild.remote.settings``: ``TRIBUILD_REMOTE_CACHE``
  or ``[cache] remote`` in Tribuild.toml, with ``TRIBUILD_REMOTE_READ`` /
  ``TRIBUILD_REMOTE_WRITE`` overriding ``remote_read`` / ``remote_write``).
- *action key*: per target, a digest of everything its outputs depend on (``action``).
- *action entry*: under the action key, the target's outputs as (relative path, content
  digest) pairs and its diagnostics, framed with a digest and, with
  ``TRIBUILD_CACHE_SECRET`` set, an HMAC-SHA256 (``tribuild.remote.entries``).
- *blob*: one output file's bytes under the SHA-256 of those bytes (a CAS): a kernel file
  shared by many targets is stored once.
- *link*: the connection of one build (``tribuild.remote.link``): the ``redis`` package is
  imported only when a link is opened, which a no-op build never does.

The build (``tribuild.driver.build``) asks ``build_cache`` for the targets it can take from
the remote before it builds, builds the others, writes everything through the same
``outputs`` path, then hands what it built to ``build_cache`` to upload.
"""
