"""SSH as OpenSSH does it, on paramiko: the config file, its options, known hosts and
the session (connection, shells, SFTP)."""
