"""``edge``: a measured capacity search made of normal runs: which rate to try next, the
``edge.json`` document, the search's settings and its lines on the terminal."""
