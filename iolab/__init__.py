"""iolab: reproducible I/O and communication performance studies."""
