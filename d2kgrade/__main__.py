from d2kgrade.cli import main

main()
