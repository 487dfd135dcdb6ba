/* Calls cpumgr's libtcm.so.1 rightly and wrongly through its C ABI: every misuse must get the
 * API's error code and change nothing, and a permit whose grant changes must hear it through its
 * callback. Prints "ok NAME" per check, or "FAIL NAME: got X, want Y"; exits 1 on any failure. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tcm.h"

static int failures;

static void expect(const char* name, long long got, long long want) {
    if (got == want) {
        printf("ok %s\n", name);
    } else {
        printf("FAIL %s: got %#llx, want %#llx\n", name, got, want);
        failures++;
    }
}

static const tcm_result_t OK = TCM_RESULT_SUCCESS, BAD = TCM_RESULT_ERROR_INVALID_ARGUMENT;

static tcm_permit_request_t request(int32_t min, int32_t max) {
    tcm_permit_request_t r;
    memset(&r, 0, sizeof r);
    r.min_sw_threads = min;
    r.max_sw_threads = max;
    r.priority = TCM_REQUEST_PRIORITY_NORMAL;
    return r;
}

static atomic_int calls;
static atomic_uint last_flags;
static void* last_arg;

static tcm_result_t on_change(tcm_permit_handle_t p, void* arg, tcm_callback_flags_t flags) {
    (void)p;
    last_arg = arg;
    uint32_t bits;
    memcpy(&bits, &flags, sizeof bits);
    atomic_store(&last_flags, bits);
    atomic_fetch_add(&calls, 1);
    return TCM_RESULT_SUCCESS;
}

/* A grant and state read back. */
static void read_permit(tcm_permit_handle_t h, uint32_t* conc, tcm_permit_state_t* state) {
    tcm_permit_t p = {conc, NULL, 1, TCM_PERMIT_STATE_VOID, {0}};
    expect("read a permit", tcmGetPermitData(h, &p), OK);
    *state = p.state;
}

int main(void) {
    tcm_client_id_t client = 0;
    expect("connect without an id", tcmConnect(on_change, NULL), BAD);
    expect("connect", tcmConnect(on_change, &client), OK);

    tcm_permit_handle_t h = NULL;
    uint32_t conc = 99;
    tcm_permit_t out = {&conc, NULL, 1, TCM_PERMIT_STATE_VOID, {0}};
    expect("request without a handle", tcmRequestPermit(client, request(0, 4), NULL, NULL, &out), BAD);
    expect("request of an unknown client", tcmRequestPermit(client + 12345, request(0, 4), NULL, &h, &out), BAD);
    expect("request min above max", tcmRequestPermit(client, request(3, 2), NULL, &h, &out), BAD);
    expect("request a negative min", tcmRequestPermit(client, request(-5, 2), NULL, &h, &out), BAD);
    tcm_permit_request_t no_constraints = request(0, 2);
    no_constraints.constraints_size = 1;
    expect("request constraints without their array", tcmRequestPermit(client, no_constraints, NULL, &h, &out), BAD);
    expect("no handle made by refused requests", h == NULL, 1);

    int tag = 7;
    expect("request", tcmRequestPermit(client, request(0, TCM_AUTOMATIC), &tag, &h, &out), OK);
    expect("request made a handle", h != NULL, 1);
    expect("granted a state", out.state == TCM_PERMIT_STATE_ACTIVE || out.state == TCM_PERMIT_STATE_PENDING, 1);
    uint32_t first = conc;
    printf("granted %u\n", first);

    tcm_permit_handle_t fake = (tcm_permit_handle_t)(uintptr_t)0xdeadbeef;
    expect("read without a permit", tcmGetPermitData(h, NULL), BAD);
    expect("read a null handle", tcmGetPermitData(NULL, &out), BAD);
    expect("read a made-up handle", tcmGetPermitData(fake, &out), BAD);
    expect("release a made-up handle", tcmReleasePermit(fake), BAD);
    expect("idle a made-up handle", tcmIdlePermit(fake), BAD);
    expect("activate a null handle", tcmActivatePermit(NULL), BAD);
    expect("renew a made-up handle", tcmRequestPermit(client, request(0, 1), NULL, &fake, &out), BAD);

    expect("register a null handle", tcmRegisterThread(NULL), BAD);
    expect("unregister unregistered", tcmUnregisterThread(), BAD);
    expect("register", tcmRegisterThread(h), OK);
    expect("unregister", tcmUnregisterThread(), OK);
    expect("unregister twice", tcmUnregisterThread(), BAD);

    tcm_permit_state_t state;
    expect("idle", tcmIdlePermit(h), OK);
    read_permit(h, &conc, &state);
    expect("idle state", state, TCM_PERMIT_STATE_IDLE);
    expect("idle has no threads", conc, 0);
    expect("activate", tcmActivatePermit(h), OK);
    read_permit(h, &conc, &state);
    expect("active again", conc, first);
    expect("deactivate", tcmDeactivatePermit(h), OK);
    read_permit(h, &conc, &state);
    expect("inactive state", state, TCM_PERMIT_STATE_INACTIVE);
    expect("renew", tcmRequestPermit(client, request(0, TCM_AUTOMATIC), &tag, &h, &out), OK);

    /* A second permit shares the budget; releasing the first gives it the first's threads, which
     * it hears through its callback. */
    if (first > 0) {
        tcm_permit_handle_t h2 = NULL;
        int tag2 = 8;
        expect("second request", tcmRequestPermit(client, request(0, TCM_AUTOMATIC), &tag2, &h2, &out), OK);
        uint32_t before;
        read_permit(h2, &before, &state);
        atomic_store(&calls, 0);
        expect("release the first", tcmReleasePermit(h), OK);
        for (int i = 0; i < 400 && atomic_load(&calls) == 0; i++) nanosleep(&(struct timespec){0, 5000000}, NULL);
        expect("callback made", atomic_load(&calls) > 0, 1);
        expect("callback with the permit's argument", last_arg == &tag2, 1);
        expect("callback says the concurrency changed", atomic_load(&last_flags) & 1u, 1);
        read_permit(h2, &conc, &state);
        expect("the second has the first's threads", conc, first);
        h = h2;
    } else {
        printf("FAIL callback: no thread granted, the test needs 2 CPUs for the program\n");
        failures++;
    }

    expect("release", tcmReleasePermit(h), OK);
    expect("release twice", tcmReleasePermit(h), BAD);
    expect("read a released permit", tcmGetPermitData(h, &out), BAD);
    expect("idle a released permit", tcmIdlePermit(h), BAD);
    expect("register with a released permit", tcmRegisterThread(h), BAD);
    expect("renew a released permit", tcmRequestPermit(client, request(0, 1), NULL, &h, &out), BAD);

    /* Another process's permit: its handle means nothing here. */
    int fds[2], done[2];
    if (pipe(fds) != 0 || pipe(done) != 0) return 2;
    pid_t child = fork();
    if (child == 0) {
        tcm_client_id_t c2;
        tcm_permit_handle_t theirs = NULL;
        tcm_permit_t o = {NULL, NULL, 0, 0, {0}};
        if (tcmConnect(NULL, &c2) != OK || tcmRequestPermit(c2, request(0, 1), NULL, &theirs, &o) != OK) _exit(3);
        if (write(fds[1], &theirs, sizeof theirs) != sizeof theirs) _exit(4);
        char b;
        if (read(done[0], &b, 1) < 0) _exit(5); /* keep the permit alive until the parent is done */
        _exit(tcmReleasePermit(theirs) == OK && tcmDisconnect(c2) == OK ? 0 : 6);
    }
    tcm_permit_handle_t foreign = NULL;
    expect("the other process made a permit", read(fds[0], &foreign, sizeof foreign), (long long)sizeof foreign);
    expect("read another process's permit", tcmGetPermitData(foreign, &out), BAD);
    expect("release another process's permit", tcmReleasePermit(foreign), BAD);
    expect("renew another process's permit", tcmRequestPermit(client, request(0, 1), NULL, &foreign, &out), BAD);
    if (write(done[1], "x", 1) != 1) return 2;
    int status = 0;
    waitpid(child, &status, 0);
    expect("the other process kept its permit", WIFEXITED(status) ? WEXITSTATUS(status) : 100, 0);

    char buf[256];
    expect("version without a buffer", tcmGetVersionInfo(NULL, 10), BAD);
    expect("version into nothing", tcmGetVersionInfo(buf, 0), BAD);
    expect("version cut short", tcmGetVersionInfo(buf, 8), OK);
    expect("version cut and terminated", (long long)strlen(buf), 7);
    expect("version", tcmGetVersionInfo(buf, sizeof buf), OK);
    printf("%s", buf);

    expect("disconnect an unknown client", tcmDisconnect(client + 12345), BAD);
    expect("disconnect", tcmDisconnect(client), OK);
    expect("disconnect twice", tcmDisconnect(client), BAD);
    expect("request after disconnect", tcmRequestPermit(client, request(0, 1), NULL, &h, &out), BAD);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
