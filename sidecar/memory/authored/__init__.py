"""Authored markdown: documents the user writes, turned into tiered rules.

``markdown`` parses a document into nodes, ``deontic`` classifies a sentence as a rule
(obligation, prohibition, ...) or not, reading the word lists in ``lexicon``, ``service``
stores and versions the documents, and ``watcher`` follows the configured folders.
Imports ``memory.core`` and ``sidecar.store``.
"""
