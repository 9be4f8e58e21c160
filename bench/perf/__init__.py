"""Speed, memory and CPU: the simulator's HTTP, signal storms, many fleets on
one worker, the store's hot paths, a fresh clone's first run, and the time to
recover from the faults production brings (`chaos`)."""
