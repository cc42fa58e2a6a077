from twin.cli import main

main()
