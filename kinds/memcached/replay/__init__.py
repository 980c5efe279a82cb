"""memcached's live replay: the trace's multigets through tailtune-client, one client per config (`live`)."""
