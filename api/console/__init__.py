"""The owner's console: see, search, correct and control one's memory in a browser.

Server-rendered pages (Jinja2) under ``/console``, signed in with the OAuth
login pages' session. :mod:`api.console.guard` signs in, checks CSRF and sets
the security headers of every console request; :mod:`api.console.tools` makes
every read and change a tool call; each page is a module of its own.
"""
