"""Who is calling: bearer → session, client, route, audience; runs and tasks; the scope revision."""
