from arvis.cli import main

main()
