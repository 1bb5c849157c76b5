from tfg.cli import main

main()
