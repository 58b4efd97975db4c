"""Analysis of asv results: reading them (``results``) and the Markdown reports (``report``:
steps across releases, a pull request's comparison). Reads results; runs nothing."""
