from convsim.cli import main

main()
