/* The real node's sandbox ("pause") process: holds the pod's namespaces, reaps orphaned children (it is
 * PID 1 when the pod shares its PID namespace) and exits on SIGINT/SIGTERM. Built static by
 * hack/build-binaries.sh node, packaged into an image by hack/realnode/image.py. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { _exit(128 + sig); }

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static int handle(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fn;
    sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("soperator-pause");
        return 0;
    }
    if (handle(SIGINT, on_stop) || handle(SIGTERM, on_stop) || handle(SIGCHLD, on_child)) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;)
        pause();
}
