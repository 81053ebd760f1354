"""Recall's stages, one module each, over one candidate type (issue 26).

A recall (``recall``, ``search_memory``, ``build_context_prompt``) runs
:func:`memory.recall.pipeline.ranked`: the question's terms (:mod:`.lexical`)
and time (:mod:`.time`), the hybrid search, the first ranking
(:mod:`memory.rules.ranking`), the optional reranker (:mod:`.rerank`), the
latest truth first (:mod:`.latest`), then the session and graph hops
(:mod:`.hops`). Each stage takes and returns
:class:`~memory.recall.candidates.Candidate`, built once from the storage row and
marked by each stage with what it learned; the handlers in
:mod:`memory.reading` shape it for the wire.
"""
