/*
 * Promela model of the Nemesis lock-free MPSC queue (Buntinas, Mercier and
 * Gropp, "Design and Evaluation of Nemesis", CCGRID 2006, Fig. 3) as
 * nemesis/queue.go implements it: SWAP on the tail to enqueue; shadow head
 * (§3.1), CAS on the tail and wait-for-link to dequeue, where the wait may
 * give up and leave the element at the head ("not yet", retried later).
 *
 * NPROD producers each own NCELL cells and send PER messages, reusing a
 * cell once the consumer has handed it back (the free-queue round trip of
 * design variation 3, reduced to a flag), so the model also covers the
 * re-enqueue of a cell that was at the queue's head a moment before.
 *
 * Checked (see mk/nemesis.mk):
 *   safety:   no element lost or duplicated, FIFO per producer (assertions),
 *             no deadlock (invalid end states);
 *   liveness: under weak fairness every message is eventually received
 *             (LTL "delivered"), so no livelock in the spin-on-next either.
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef NCELL
#define NCELL 2
#endif
#ifndef PER
#define PER 3
#endif
#define NIL 0
#define NCELLS (NPROD * NCELL)
#define TOTAL (NPROD * PER)

/* Shared memory: queue head, tail and shadow head; per cell the next link
 * and the payload (producer, sequence number). Cell ids are 1..NCELLS. */
byte head = NIL;
byte tail = NIL;
byte shadow = NIL;
byte next[NCELLS + 1];
byte from[NCELLS + 1];
byte seq[NCELLS + 1];
bool home[NCELLS + 1];   /* cell is back in its owner's free pool */

byte received = 0;
byte expect[NPROD];      /* next sequence number expected per producer */

proctype producer(byte p)
{
	byte k = 0;
	byte c;
	byte prev;
	do
	:: k == PER -> break
	:: else ->
		/* take any cell of ours that is home (blocks until one is) */
		if
		:: home[p * NCELL + 1] -> c = p * NCELL + 1
		:: home[p * NCELL + 2] -> c = p * NCELL + 2
		fi;
		home[c] = false;
		from[c] = p;
		seq[c] = k;
		next[c] = NIL;
		/* Enqueue, Fig. 3 */
		atomic { prev = tail; tail = c }        /* SWAP */
		if
		:: prev == NIL -> head = c
		:: else -> next[prev] = c
		fi;
		k++
	od
}

/*
 * The consumer waits where the code polls: "queue empty" and "tail swapped
 * but not linked yet" make dequeue return nothing and the caller retry,
 * which re-reads the same shared variables; modelled as blocking on them,
 * a lost element leaves the consumer blocked for ever, which the safety run
 * reports as an invalid end state.
 */
proctype consumer()
{
	byte h;
	byte n;
	bool swapped;
	do
	:: received == TOTAL -> break
	:: else ->
		/* Dequeue with shadow head */
		h = shadow;
		if
		:: h == NIL ->
			head != NIL;                      /* wait: empty */
			h = head;
			head = NIL;
			shadow = h
		:: else -> skip
		fi;
		n = next[h];
		if
		:: n == NIL ->
			atomic {                          /* CAS(tail, h, NIL) */
				if
				:: tail == h -> tail = NIL; swapped = true
				:: else -> swapped = false
				fi
			}
			if
			:: swapped -> skip
			:: else ->
				/* an enqueuer swapped the tail but has not
				 * linked yet: h stays at the head until it has */
				next[h] != NIL;
				n = next[h]
			fi
		:: else -> skip
		fi;
		shadow = n;
progress_got:
		assert(from[h] < NPROD);
		assert(seq[h] == expect[from[h]]);   /* FIFO, nothing lost or twice */
		assert(!home[h]);
		expect[from[h]]++;
		received++;
		home[h] = true                        /* back to the owner */
	od;
	/* everything delivered exactly once, queue left empty */
	assert(head == NIL && tail == NIL && shadow == NIL);
	byte i = 0;
	do
	:: i == NPROD -> break
	:: else -> assert(expect[i] == PER); i++
	od
}

init {
	byte p = 0;
	byte i = 1;
	assert(NCELL == 2);   /* the cell choice in producer lists two cells */
	atomic {
		do
		:: i > NCELLS -> break
		:: else -> home[i] = true; i++
		od;
		do
		:: p == NPROD -> break
		:: else -> run producer(p); p++
		od;
		run consumer()
	}
}

ltl delivered { <> (received == TOTAL) }
