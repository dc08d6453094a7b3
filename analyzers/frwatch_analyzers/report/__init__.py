"""What a person reads: the short terminal report (``terminal``) and the self-contained HTML page
(``html``: ``html/page.py`` renders ``html/report.html.j2``).

May import: everything below ``cli`` (in practice: the verdict and ``base``)."""
